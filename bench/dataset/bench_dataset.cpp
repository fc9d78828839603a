// tnt-bench-dataset: samples per second of the input pipeline, with and without prefetch, of a
// folder of PNG and JPEG images decoded by 1 and 2 threads, and of the FreeDict translation
// pairs' sequence loader.
//
// Each case is run twice per prefetch setting: with a consumer that does nothing (the pipeline's
// own throughput) and with a consumer that "computes" for as long as loading one batch took
// without prefetch (it sleeps, so the worker has the core: an ideal-overlap stand-in for compute;
// the table shows how long the sleeps really took, as short ones overshoot).
// Without prefetch the second run costs load + compute per batch; with prefetch, ideally
// max(load, compute), and the consumer's wait in next() shows how much loading it still sees.
#include <fmt/format.h>
#include <png.h>
#include <spdlog/spdlog.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "tnt/dataset/error.h"
#include "tnt/dataset/loader.h"
#include "tnt/dataset/sequence.h"

namespace {

using Clock = std::chrono::steady_clock;
using tnt::data::Loader;
using tnt::data::LoaderOptions;

// Process CPU seconds: on a loaded machine wall time overstates single-threaded work.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Case {
  std::string name;
  std::shared_ptr<const tnt::data::Source> source;
  LoaderOptions options;
  std::string augment;
};

struct Row {
  std::string name, shape, augment;
  std::size_t batch = 0, prefetch = 0, batches = 0;
  double compute_ms = 0, samples_per_s = 0, wait_ms = 0;
};

Row measure(const Case& c, std::size_t prefetch, double compute_ms, std::size_t batches) {
  LoaderOptions options = c.options;
  options.prefetch = prefetch;
  options.end_epoch = 0;  // no end: the bench takes what it needs
  Loader loader(c.source, options);
  const auto compute = std::chrono::duration<double, std::milli>(compute_ms);
  // Warm-up: first allocations, page faults, the queue filling.
  for (std::size_t i = 0; i < 2; ++i) loader.recycle(std::move(*loader.next()));
  std::size_t samples = 0;
  double waited = 0, computed = 0;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < batches; ++i) {
    const auto before = Clock::now();
    auto batch = loader.next();
    waited += seconds_since(before);
    samples += batch->local_count;
    if (compute_ms > 0) {
      const auto t = Clock::now();
      std::this_thread::sleep_for(compute);
      computed += seconds_since(t);  // what the sleep really took: short sleeps overshoot
    }
    loader.recycle(std::move(*batch));
  }
  const double elapsed = seconds_since(start);
  const auto s = c.source->shape();
  return Row{c.name,
             fmt::format("{}x{}x{}", s.channels, s.height, s.width),
             c.augment,
             options.plan.global_batch,
             prefetch,
             batches,
             1e3 * computed / static_cast<double>(batches),
             static_cast<double>(samples) / elapsed,
             1e3 * waited / static_cast<double>(batches)};
}

// The FreeDict translation pairs: opening (read + clean, split, vocabulary, tokenize) and the
// sequence loader's samples/s (median of 5), with and without length bucketing, per tokenizer.
struct SequenceRow {
  std::string tokenizer;
  std::size_t vocabulary = 0, batch = 0, bucket = 0, batches = 0;
  double samples_per_s = 0, target_tokens_per_s = 0, padding = 0;
};

struct FreedictReport {
  std::string note;
  double read_s = 0, read_cpu_s = 0, split_s = 0;
  std::size_t pairs = 0, train = 0;
  std::vector<std::pair<std::string, double>> vocabulary_s, vocabulary_cpu_s, tokenize_s;  // per tokenizer
  std::vector<SequenceRow> rows;
};

SequenceRow measure_sequences(std::shared_ptr<const tnt::data::SequenceSource> source, std::size_t batch,
                              std::size_t bucket, std::size_t batches) {
  tnt::data::SequenceLoaderOptions options;
  options.plan.global_batch = batch;
  options.plan.seed = 1;
  options.bucket_batches = bucket;
  tnt::data::SequenceLoader loader(source, options);
  loader.next();  // warm-up: the epoch's order
  std::size_t samples = 0, tokens = 0, slots = 0;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < batches; ++i) {
    const auto b = loader.next();
    samples += b->local_count;
    tokens += b->local_target_tokens;
    slots += b->local_count * b->target_length;
  }
  const double elapsed = seconds_since(start);
  return SequenceRow{std::string(to_string(source->vocabulary().kind())),
                     source->vocabulary().size(),
                     batch,
                     bucket,
                     batches,
                     static_cast<double>(samples) / elapsed,
                     static_cast<double>(tokens) / elapsed,
                     1.0 - static_cast<double>(tokens) / static_cast<double>(slots)};
}

FreedictReport bench_freedict(const std::string& path, std::size_t max_chars, std::size_t bpe_merges, std::size_t batch,
                              std::size_t batches) {
  FreedictReport report;
  tnt::data::FreedictOptions options;
  options.path = path;
  options.max_chars = max_chars;
  auto t = Clock::now();
  double cpu = cpu_seconds();
  auto corpus = tnt::data::load_freedict(options);
  report.read_s = seconds_since(t);
  report.read_cpu_s = cpu_seconds() - cpu;
  report.pairs = corpus.pairs.size();
  t = Clock::now();
  auto splits = tnt::data::split_by_headword(corpus.pairs, {});
  report.split_s = seconds_since(t);
  report.train = splits.train.size();
  report.note = fmt::format(
      "FreeDict {}: {} entries -> {} pairs (max {} characters a side) read and cleaned in {:.2f} s ({:.2f} s "
      "CPU), split in {:.2f} s ({} training pairs)",
      corpus.dict_path.string(), corpus.stats.entries, report.pairs, max_chars, report.read_s, report.read_cpu_s,
      report.split_s, report.train);
  const auto texts = tnt::data::vocabulary_texts(splits.train);
  std::vector<tnt::data::VocabularyOptions> tokenizers{{}};
  if (bpe_merges > 0) tokenizers.push_back({.kind = tnt::data::TokenizerKind::bpe, .merges = bpe_merges});
  for (const auto& vo : tokenizers) {
    const std::string name(to_string(vo.kind));
    t = Clock::now();
    cpu = cpu_seconds();
    auto vocabulary = std::make_shared<const tnt::data::Vocabulary>(tnt::data::Vocabulary::learn(texts, vo));
    report.vocabulary_s.emplace_back(name, seconds_since(t));
    report.vocabulary_cpu_s.emplace_back(name, cpu_seconds() - cpu);
    t = Clock::now();
    auto source = std::make_shared<const tnt::data::SequenceSource>(splits.train, vocabulary, "freedict train");
    report.tokenize_s.emplace_back(name, seconds_since(t));
    // Bucketing off and on alternate, 5 runs each, and each row is the median run: the two see
    // the same disturbances from other work on the machine.
    std::vector<SequenceRow> runs[2];
    for (int repeat = 0; repeat < 5; ++repeat) {
      for (std::size_t k = 0; k < 2; ++k) runs[k].push_back(measure_sequences(source, batch, k * 20, batches));
    }
    for (auto& r : runs) {
      std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.samples_per_s < b.samples_per_s; });
      report.rows.push_back(r[r.size() / 2]);
    }
  }
  return report;
}

void print_freedict(const FreedictReport& r, bool json) {
  auto timings = [&](const std::vector<std::pair<std::string, double>>& v) {
    std::string out;
    for (const auto& [name, s] : v) out += fmt::format("{}\"{}\": {:.3f}", out.empty() ? "" : ", ", name, s);
    return "{" + out + "}";
  };
  if (json) {
    std::cout << fmt::format(
        ", \"freedict\": {{\"pairs\": {}, \"train_pairs\": {}, \"read_s\": {:.3f}, \"read_cpu_s\": {:.3f}, "
        "\"split_s\": {:.3f}, \"vocabulary_s\": {}, \"vocabulary_cpu_s\": {}, \"tokenize_s\": {}, \"rows\": [",
        r.pairs, r.train, r.read_s, r.read_cpu_s, r.split_s, timings(r.vocabulary_s), timings(r.vocabulary_cpu_s),
        timings(r.tokenize_s));
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
      const auto& x = r.rows[i];
      std::cout << fmt::format(
          "{}\n  {{\"tokenizer\": \"{}\", \"vocabulary\": {}, \"batch\": {}, \"bucket_batches\": {}, \"batches\": {}, "
          "\"samples_per_s\": {:.1f}, \"target_tokens_per_s\": {:.1f}, \"padding\": {:.4f}}}",
          i == 0 ? "" : ",", x.tokenizer, x.vocabulary, x.batch, x.bucket, x.batches, x.samples_per_s,
          x.target_tokens_per_s, x.padding);
    }
    std::cout << "\n]}";
    return;
  }
  std::cout << "\n" << r.note << "\n";
  for (std::size_t i = 0; i < r.vocabulary_s.size(); ++i) {
    std::cout << fmt::format("{} vocabulary learned in {:.2f} s ({:.2f} s CPU), training split tokenized in {:.2f} s\n",
                             r.vocabulary_s[i].first, r.vocabulary_s[i].second, r.vocabulary_cpu_s[i].second,
                             r.tokenize_s[i].second);
  }
  std::cout << fmt::format("\n{:<10} {:>10} {:>6} {:>8} {:>8} {:>12} {:>14} {:>9}\n", "tokenizer", "vocabulary",
                           "batch", "bucket", "batches", "samples/s", "target tok/s", "padding");
  for (const auto& x : r.rows) {
    std::cout << fmt::format("{:<10} {:>10} {:>6} {:>8} {:>8} {:>12.0f} {:>14.0f} {:>8.1f}%\n", x.tokenizer,
                             x.vocabulary, x.batch, x.bucket == 0 ? std::string("off") : std::to_string(x.bucket),
                             x.batches, x.samples_per_s, x.target_tokens_per_s, 100 * x.padding);
  }
}

Case synthetic_case(std::size_t batch) {
  Case c{"synthetic", tnt::data::make_synthetic_source({3, 224, 224}, 1000, 100000, 7), {}, "crop16+flip+normalise"};
  c.options.plan.global_batch = batch;
  c.options.plan.seed = 1;
  c.options.transform.crop_padding = 16;
  c.options.transform.horizontal_flip = true;
  c.options.transform.mean = {0.485f, 0.456f, 0.406f};
  c.options.transform.std = {0.229f, 0.224f, 0.225f};
  return c;
}

// --- image folder ----------------------------------------------------------------------------

// Writes `count` images of w×h in 4 class folders under a new temporary folder, every other one
// PNG, the rest JPEG (quality 90): a smooth gradient with noise, so both codecs do real work.
std::filesystem::path write_image_folder(std::size_t count, std::size_t w, std::size_t h) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tnt-bench-images-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::filesystem::path root = pattern;
  std::unique_ptr<void, int (*)(tjhandle)> jpeg(tjInitCompress(), tjDestroy);
  std::vector<std::uint8_t> rgb(w * h * 3);
  std::uint32_t noise = 12345;
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t k = 0; k < rgb.size(); ++k) {
      noise = noise * 1664525u + 1013904223u;
      rgb[k] = static_cast<std::uint8_t>((k / 3 % w) * 200 / w + (i % 4) * 10 + (noise >> 28));
    }
    const auto dir = root / fmt::format("class{}", i % 4);
    std::filesystem::create_directories(dir);
    std::vector<std::uint8_t> bytes;
    if (i % 2 == 0) {
      png_image image;
      std::memset(&image, 0, sizeof image);
      image.version = PNG_IMAGE_VERSION;
      image.width = static_cast<png_uint_32>(w);
      image.height = static_cast<png_uint_32>(h);
      image.format = PNG_FORMAT_RGB;
      png_alloc_size_t size = 0;
      png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr);
      bytes.resize(size);
      if (!png_image_write_to_memory(&image, bytes.data(), &size, 0, rgb.data(), 0, nullptr)) {
        throw std::runtime_error(std::string("PNG encoding failed: ") + image.message);
      }
      bytes.resize(size);
    } else {
      unsigned char* buffer = nullptr;
      unsigned long size = 0;
      if (tjCompress2(jpeg.get(), rgb.data(), static_cast<int>(w), 0, static_cast<int>(h), TJPF_RGB, &buffer, &size,
                      TJSAMP_420, 90, 0) != 0) {
        throw std::runtime_error("JPEG encoding failed");
      }
      bytes.assign(buffer, buffer + size);
      tjFree(buffer);
    }
    std::ofstream(dir / fmt::format("{:05}.{}", i, i % 2 == 0 ? "png" : "jpg"), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  return root;
}

struct ImageRow {
  std::size_t workers = 0;
  double samples_per_s = 0;
};

// The image folder through the loader with prefetch, 1 and 2 decoding threads alternating
// (`repeats` runs each), median samples/s of each.
std::vector<ImageRow> bench_images(const std::shared_ptr<const tnt::data::Source>& source, std::size_t batch,
                                   std::size_t batches, std::size_t prefetch, std::size_t repeats) {
  std::vector<std::vector<double>> rates(2);
  for (std::size_t r = 0; r < repeats; ++r) {
    for (std::size_t w = 1; w <= 2; ++w) {
      Case c{"image-folder", source, {}, "none"};
      c.options.plan.global_batch = batch;
      c.options.plan.seed = 1;
      c.options.workers = w;
      rates[w - 1].push_back(measure(c, prefetch, 0, batches).samples_per_s);
    }
  }
  std::vector<ImageRow> rows;
  for (std::size_t w = 1; w <= 2; ++w) {
    auto& v = rates[w - 1];
    std::sort(v.begin(), v.end());
    rows.push_back({w, v[v.size() / 2]});
  }
  return rows;
}

void print_images(const std::vector<ImageRow>& rows, const std::string& note, std::size_t batch, bool json) {
  if (json) {
    std::cout << ", \"image_folder\": {\"note\": \"" << note << "\", \"batch\": " << batch << ", \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::cout << fmt::format("{}{{\"decode_threads\": {}, \"samples_per_s\": {:.1f}}}", i == 0 ? "" : ", ",
                               rows[i].workers, rows[i].samples_per_s);
    }
    std::cout << "]}";
    return;
  }
  std::cout << fmt::format("\n{}\n{:<16} {:>5} {:>12} {:>8}\n", note, "decode threads", "batch", "samples/s",
                           "speed-up");
  for (const auto& r : rows) {
    std::cout << fmt::format("{:<16} {:>5} {:>12.0f} {:>8.2f}\n", r.workers, batch, r.samples_per_s,
                             r.samples_per_s / rows.front().samples_per_s);
  }
}

// Prefetch off and on, alone and with a consumer as busy as one batch's loading.
std::vector<Row> measure_case(const Case& c, std::size_t prefetch, std::size_t batches) {
  const Row alone = measure(c, 0, 0, batches);
  const double load_ms = 1e3 * static_cast<double>(c.options.plan.global_batch) / alone.samples_per_s;
  return {alone, measure(c, prefetch, 0, batches), measure(c, 0, load_ms, batches),
          measure(c, prefetch, load_ms, batches)};
}

struct ImageReport {
  std::vector<ImageRow> rows;
  std::string note;
  std::size_t batch = 0;
};

struct ImageOptions {
  std::string folder;  // empty: generate one
  std::size_t count = 512, size = 32, batch = 64, batches = 24, repeats = 3;
  bool skip = false;
};

void add_image_options(CLI::App& app, ImageOptions& o) {
  app.add_flag("--no-images", o.skip, "skip the image folder");
  app.add_option("--image-folder", o.folder,
                 "a folder of class folders of PNG/JPEG images (default: generate --images 64x48 images, half PNG "
                 "and half JPEG, in a temporary folder)");
  app.add_option("--images", o.count, "images to generate")->check(CLI::PositiveNumber);
  app.add_option("--image-size", o.size, "decoded to 3 x N x N")->check(CLI::PositiveNumber);
  app.add_option("--image-batch", o.batch, "image batch size")->check(CLI::PositiveNumber);
  app.add_option("--image-batches", o.batches, "image batches timed per run")->check(CLI::PositiveNumber);
  app.add_option("--image-repeats", o.repeats, "alternating runs per thread count (median)")
      ->check(CLI::PositiveNumber);
}

// The image folder's report: the given folder, or `count` generated 64x48 images removed after.
ImageReport measure_images(const ImageOptions& o, std::size_t prefetch) {
  const bool generated = o.folder.empty();
  const auto root = generated ? write_image_folder(o.count, 64, 48) : std::filesystem::path(o.folder);
  try {
    auto source = tnt::data::make_image_folder_source(root, {3, o.size, o.size});
    ImageReport report{
        bench_images(source, o.batch, o.batches, prefetch, o.repeats),
        fmt::format("image folder ({}{}), decoded and resized to 3x{}x{}, prefetch {}, median of {} alternating "
                    "runs of {} batches:",
                    source->describe(), generated ? "; generated 64x48, half PNG, half JPEG q90" : "", o.size, o.size,
                    prefetch, o.repeats, o.batches),
        o.batch};
    if (generated) std::filesystem::remove_all(root);
    return report;
  } catch (...) {
    if (generated) std::filesystem::remove_all(root);
    throw;
  }
}

void print_report(const std::vector<Row>& rows, double open_s, const std::string& load_note,
                  const std::optional<FreedictReport>& freedict, const std::optional<ImageReport>& images, bool json) {
  if (json) {
    std::cout << "{\"bench\": \"tnt-bench-dataset\", \"cores\": " << std::thread::hardware_concurrency()
              << ", \"fashion_mnist_open_s\": " << open_s << ", \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::cout << fmt::format(
          "{}\n  {{\"data\": \"{}\", \"shape\": \"{}\", \"augment\": \"{}\", \"batch\": {}, "
          "\"prefetch\": {}, \"compute_ms_per_batch\": {:.3f}, \"batches\": {}, "
          "\"samples_per_s\": {:.1f}, \"wait_ms_per_batch\": {:.3f}}}",
          i == 0 ? "" : ",", r.name, r.shape, r.augment, r.batch, r.prefetch, r.compute_ms, r.batches, r.samples_per_s,
          r.wait_ms);
    }
    std::cout << "\n]";
    if (freedict) print_freedict(*freedict, true);
    if (images) print_images(images->rows, images->note, images->batch, true);
    std::cout << "}\n";
  } else {
    if (!rows.empty()) {
      if (!load_note.empty()) std::cout << load_note << "\n";
      std::cout << fmt::format(
          "{} hardware threads; compute = simulated consumer work per batch "
          "(a sleep as long as one batch's loading without prefetch; measured)\n\n",
          std::thread::hardware_concurrency());
      std::cout << fmt::format("{:<14} {:<10} {:<22} {:>5} {:>8} {:>11} {:>8} {:>12} {:>10}\n", "data", "shape",
                               "augment", "batch", "prefetch", "compute ms", "batches", "samples/s", "wait ms");
      for (const auto& r : rows) {
        std::cout << fmt::format("{:<14} {:<10} {:<22} {:>5} {:>8} {:>11.2f} {:>8} {:>12.0f} {:>10.3f}\n", r.name,
                                 r.shape, r.augment, r.batch,
                                 r.prefetch == 0 ? std::string("off") : std::to_string(r.prefetch), r.compute_ms,
                                 r.batches, r.samples_per_s, r.wait_ms);
      }
    }
    if (freedict) print_freedict(*freedict, false);
    if (images) print_images(images->rows, images->note, images->batch, false);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tnt-bench-dataset: input pipeline throughput (samples/s), with and without prefetch"};
  bool json = false, synthetic_only = false, no_freedict = false, freedict_only = false;
  std::size_t sequence_batch = 64, sequence_batches = 2000, freedict_max_chars = 64, bpe_merges = 1000;
  std::string freedict_dir;
  std::size_t mnist_batch = 128, synthetic_batch = 32, mnist_batches = 400, synthetic_batches = 30, prefetch = 4;
  std::string data_dir;
  app.add_flag("--json", json, "print JSON instead of a table");
  app.add_option("--mnist-batch", mnist_batch, "Fashion-MNIST batch size")->check(CLI::PositiveNumber);
  app.add_option("--mnist-batches", mnist_batches, "Fashion-MNIST batches timed per run")->check(CLI::PositiveNumber);
  app.add_option("--synthetic-batch", synthetic_batch, "synthetic 224x224x3 batch size")->check(CLI::PositiveNumber);
  app.add_option("--synthetic-batches", synthetic_batches, "synthetic batches timed per run")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefetch", prefetch, "queue depth of the prefetching runs")->check(CLI::PositiveNumber);
  app.add_option("--data-dir", data_dir, "Fashion-MNIST directory (default: $TNT_DATA_DIR, then installed data sets)");
  app.add_flag("--synthetic-only", synthetic_only, "skip Fashion-MNIST");
  auto* skip = app.add_flag("--no-freedict", no_freedict, "skip the FreeDict translation pairs");
  app.add_flag("--freedict-only", freedict_only, "only the FreeDict translation pairs")->excludes(skip);
  app.add_option("--freedict", freedict_dir,
                 "FreeDict eng-deu directory or file (default: $TNT_DATA_DIR, then /usr/share/dictd)");
  app.add_option("--sequence-batch", sequence_batch, "FreeDict global batch (pairs)")->check(CLI::PositiveNumber);
  app.add_option("--sequence-batches", sequence_batches, "FreeDict batches timed per run")->check(CLI::PositiveNumber);
  app.add_option("--freedict-max-chars", freedict_max_chars, "drop pairs with a longer side (0 = keep all)");
  app.add_option("--bpe-merges", bpe_merges, "merges of the BPE vocabulary (0 = character level only)");
  ImageOptions image_options;
  add_image_options(app, image_options);
  CLI11_PARSE(app, argc, argv);

  try {
    std::optional<FreedictReport> freedict;
    if (!no_freedict) {
      freedict = bench_freedict(freedict_dir, freedict_max_chars, bpe_merges, sequence_batch, sequence_batches);
    }
    std::vector<Case> cases;
    std::string load_note;
    double open_s = 0;
    if (!synthetic_only && !freedict_only) {
      tnt::data::SourceConfig config;
      config.kind = tnt::data::SourceKind::fashion_mnist;
      config.path = data_dir;
      const auto t = Clock::now();
      auto source = tnt::data::make_source(config);
      open_s = seconds_since(t);
      load_note =
          fmt::format("Fashion-MNIST train: opened and decompressed in {:.2f} s ({})", open_s, source->describe());
      Case plain{"fashion-mnist", source, {}, "normalise"};
      plain.options.plan.global_batch = mnist_batch;
      plain.options.plan.seed = 1;
      plain.options.transform.mean = {0.2860f};
      plain.options.transform.std = {0.3530f};
      cases.push_back(plain);
      Case augmented = plain;
      augmented.augment = "crop4+flip+normalise";
      augmented.options.transform.crop_padding = 4;
      augmented.options.transform.horizontal_flip = true;
      cases.push_back(augmented);
    }
    if (!freedict_only) cases.push_back(synthetic_case(synthetic_batch));
    std::vector<Row> rows;
    for (const auto& c : cases) {
      const auto more = measure_case(c, prefetch, c.name == "synthetic" ? synthetic_batches : mnist_batches);
      rows.insert(rows.end(), more.begin(), more.end());
    }
    std::optional<ImageReport> image_report;
    if (!image_options.skip && !freedict_only) image_report = measure_images(image_options, prefetch);
    print_report(rows, open_s, load_note, freedict, image_report, json);
  } catch (const std::exception& e) {
    std::cerr << "tnt-bench-dataset: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
