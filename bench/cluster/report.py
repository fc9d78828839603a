"""bench/cluster's tables: the measurements, the fitted alpha-beta model (alpha_beta.py), its
error on every measured point, and its projections to larger clusters."""
import os
import statistics
import time

import alpha_beta

GBIT = 1e9
PROJECT_HOSTS = [2, 4, 8, 16, 32, 64]
PROJECT_RATES_GBIT = [10, 25, 100]
PER_HOST_BATCH = 32  # the projections' samples per host and step (weak scaling)


def rate_text(rate_bps):
    return "unshaped" if rate_bps is None else f"{rate_bps / GBIT:g} Gbit/s"


def config_label(c):
    return f"2 hosts x {c['per_host']} rank(s), {c['algorithm']}, {rate_text(c['rate_bps'])}"


def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def model_name(algorithm):
    return "auto" if algorithm == "default" else algorithm


def points_of(results, per_host, algorithm=None):
    return [{"algorithm": model_name(r["algorithm"]), "hosts": 2, "per_host": per_host, "rate_bps": r["rate_bps"],
             "bytes": b, "seconds": t, "config": config_label(r)}
            for r in results if r["per_host"] == per_host and (algorithm is None or r["algorithm"] == algorithm)
            for b, t in r["seconds"].items()]


def fit(results, algorithms):
    """One parameter set per algorithm: each one's beta_cpu from its unshaped large sizes, the
    link's eta from the rate sweep (1 rank per host), each one's alpha from its unshaped small
    sizes."""
    warnings = []
    models = {"ring, 1 rank/host": {"algorithm": "auto", "per_host": 1, "points": points_of(results, 1)}}
    for algorithm in algorithms:
        models[f"{algorithm}, 2 ranks/host"] = {"algorithm": model_name(algorithm), "per_host": 2,
                                                "points": points_of(results, 2, algorithm)}
    for name, m in models.items():
        m["beta_cpu"] = alpha_beta.fit_cpu(m["points"])
        if m["beta_cpu"] <= 0:
            warnings.append(f"{name}: the fit gave beta_cpu = {m['beta_cpu']:.3g} s/B <= 0; the model uses 1e-12")
            m["beta_cpu"] = 1e-12
    sweep = models["ring, 1 rank/host"]
    try:
        eta = alpha_beta.fit_eta(sweep["points"], sweep["beta_cpu"])
    except ValueError as e:
        eta = float("nan")
        warnings.append(str(e))
    if not 0 < eta <= 1.2:
        warnings.append(f"the rate sweep gave eta = {eta:.3g}, outside (0, 1.2]; the model uses eta = 1")
        eta = 1.0
    for name, m in models.items():
        m["eta"] = eta
        m["alpha"] = alpha_beta.fit_alpha(m["points"], m["beta_cpu"])
        if m["alpha"] < 0:
            warnings.append(f"{name}: the fit gave alpha = {m['alpha']:.3g} s < 0; the model uses 0")
            m["alpha"] = 0.0
        m["errors"] = alpha_beta.errors(m, m.pop("points"))
    return models, warnings


def jobs_for_projection(results, resnet, global_batch, speedup):
    """LeNet-5 from the 2 hosts x 1 rank unshaped run (global_batch / 2 samples per rank), ResNet-50
    from its 1-rank measurement, both scaled to PER_HOST_BATCH samples per host and divided by speedup."""
    base = next(r for r in results if r["per_host"] == 1 and r["rate_bps"] is None)["job"]
    per_rank = global_batch / 2
    jobs = {}
    if base["parameters"]:
        jobs["LeNet-5"] = {"gradient_bytes": 4 * base["parameters"],
                           **{k: base[f"{k}_ms"] / 1e3 * PER_HOST_BATCH / per_rank / speedup
                              for k in ("forward", "backward", "optimizer")}}
    if resnet:
        jobs["ResNet-50"] = {"gradient_bytes": 4 * resnet["parameters"],
                             **{k: resnet[k] * PER_HOST_BATCH / speedup for k in ("forward", "backward", "optimizer")}}
    return jobs


def variants(models):
    """Each fitted model, and the same with beta_cpu = 0: hosts whose CPUs keep up with the link
    (this machine's beta_cpu is a loaded 2-core VM's; a cluster host's is smaller)."""
    for name, m in models.items():
        yield name, m
        yield f"{name} [CPU keeps up]", {**m, "beta_cpu": 0.0}


def project(models, jobs):
    out = []
    for name, m in variants(models):
        for job_name, job in jobs.items():
            for rate in PROJECT_RATES_GBIT:
                for hosts in PROJECT_HOSTS:
                    p = alpha_beta.step_projection(m, m["algorithm"], m["per_host"], hosts, rate * GBIT, job)
                    out.append({"model": name, "job": job_name, "rate_gbit": rate, "hosts": hosts, **p})
    return out


def build(args, results, resnet, supported, elapsed):
    algorithms = sorted({r["algorithm"] for r in results if r["per_host"] == 2}, key=["ring", "hierarchical",
                                                                                     "default"].index)
    models, warnings = fit(results, algorithms)
    jobs = jobs_for_projection(results, resnet, args.global_batch, args.compute_speedup)
    unshaped = next(r for r in results if r["per_host"] == 1 and r["rate_bps"] is None)
    largest = max(unshaped["seconds"])
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
        "load_average": os.getloadavg(), "seconds": round(elapsed), "rounds": args.rounds, "quick": args.quick,
        "algorithm_variable": ("TNT_ALLREDUCE_ALGORITHM=ring|hierarchical forced each 2 x 2 algorithm" if supported
                               else "this build does not read TNT_ALLREDUCE_ALGORITHM: the 2 x 2 runs used tnt's "
                               "default algorithm, no flat-against-hierarchical comparison"),
        "unshaped_busbw_GBps": largest / unshaped["seconds"][largest] / 1e9,
        "results": [{**r, "seconds": {str(b): t for b, t in r["seconds"].items()},
                     "seconds_rounds": {str(b): t for b, t in r["seconds_rounds"].items()}} for r in results],
        "resnet50": resnet, "jobs": jobs, "compute_speedup": args.compute_speedup,
        "models": models, "model_warnings": warnings, "projections": project(models, jobs),
    }


def print_measured(doc):
    results = doc["results"]
    for per_host in (1, 2):
        rs = [r for r in results if r["per_host"] == per_host]
        sizes = sorted({int(b) for r in rs for b in r["seconds"]})
        print(f"\n2 hosts x {per_host} rank(s): allreduce float32 sum, time in ms (busbw GB/s), medians of "
              f"{doc['rounds']} rounds" + ("; 4 ranks on 2 cores: CPU-bound" if per_host == 2 else ""))
        heads = [f"{r['algorithm']} {rate_text(r['rate_bps'])}" for r in rs]
        print(f"{'size':>8} | " + " | ".join(f"{h:>18}" for h in heads))
        p = 2 * per_host
        for b in sizes:
            cells = []
            for r in rs:
                t = r["seconds"].get(str(b))
                cells.append(f"{t * 1e3:9.3f} ({2 * (p - 1) / p * b / t / 1e9:5.3f})" if t else " " * 18)
            print(f"{human(b):>8} | " + " | ".join(cells))
        print(f"{'job':>8} | " + " | ".join(f"{r['job']['samples_per_s']:9.0f} samples/s" for r in rs))
        print(f"{'exposed':>8} | " + " | ".join(f"{r['job']['exposed_ms']:9.2f} ms/step   " for r in rs))
    print("default: TNT_ALLREDUCE_ALGORITHM unset (tnt's choice); job: the main job (LeNet-5, Fashion-MNIST, global "
          "batch 64, 1 thread per rank); exposed: the step's wait for its allreduces")


def print_models(doc):
    print("\nalpha-beta model, T = S alpha + n max(C beta_cpu, W 8 / (eta R)) (bench/cluster/README.md):")
    print(f"{'model':<28} {'alpha us':>9} {'beta_cpu ns/B':>14} {'(= GB/s)':>9} {'eta':>6} {'median |err|':>12} "
          f"{'worst |err|':>11}")
    for name, m in doc["models"].items():
        errs = [abs(e["error"]) for e in m["errors"]]
        gbps = f"{1 / m['beta_cpu'] / 1e9:9.2f}" if m["beta_cpu"] > 0 else f"{'inf':>9}"
        print(f"{name:<28} {m['alpha'] * 1e6:9.1f} {m['beta_cpu'] * 1e9:14.3f} {gbps} {m['eta']:6.3f} "
              f"{statistics.median(errs):12.0%} {max(errs):11.0%}")
    for w in doc["model_warnings"]:
        print(f"WARNING: {w}")
    print("\nthe model against every measured point (error = model / measured - 1):")
    print(f"{'configuration':<48} {'size':>8} {'measured ms':>12} {'model ms':>10} {'error':>7}")
    for name, m in doc["models"].items():
        for e in m["errors"]:
            print(f"{e['config']:<48} {human(e['bytes']):>8} {e['seconds'] * 1e3:12.3f} {e['model_seconds'] * 1e3:10.3f}"
                  f" {e['error']:7.0%}")


def print_projections(doc):
    if not doc["jobs"]:
        print("\nno projection: the main job did not print its parameter count")
        return
    print(f"\nPROJECTIONS, UNVALIDATED beyond the measured range (2 hosts; tbf 0.25-2 Gbit/s and unshaped veth at "
          f"{doc['unshaped_busbw_GBps']:.2f} GB/s busbw): weak scaling, {PER_HOST_BATCH} samples per host and step, "
          f"each host computing as fast as one rank here" +
          (f" x {doc['compute_speedup']:g}" if doc["compute_speedup"] != 1 else "") + ".")
    for job_name, job in doc["jobs"].items():
        compute = job["forward"] + job["backward"] + job["optimizer"]
        print(f"\n{job_name}: gradient {job['gradient_bytes'] / 2**20:.2f} MiB, compute {compute * 1e3:.1f} ms per "
              f"step; cells: allreduce ms, efficiency without overlap / with full overlap")
        for rate in PROJECT_RATES_GBIT:
            print(f"  {f'{rate} Gbit/s':<44}" + " ".join(f"{f'{h} hosts':>20}" for h in PROJECT_HOSTS))
            for name in dict.fromkeys(p["model"] for p in doc["projections"]):
                cells = [p for p in doc["projections"] if p["model"] == name and p["job"] == job_name and
                         p["rate_gbit"] == rate]
                print(f"  {name:<44}" + " ".join(
                    f"{p['allreduce_s'] * 1e3:8.2f} {p['efficiency_no_overlap']:5.2f}/{p['efficiency_overlap']:4.2f}"
                    for p in cells))


def print_text(doc):
    print(f"cluster in a box, {doc['date']}, {doc['cores']} cores, load average at the end "
          f"{doc['load_average'][0]:.1f} (other processes share the cores), {doc['seconds']} s"
          + (" (--quick: a smoke run, not a measurement)" if doc["quick"] else ""))
    print(doc["algorithm_variable"])
    print_measured(doc)
    print_models(doc)
    print_projections(doc)
