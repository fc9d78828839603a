@0x930f47993a47588d;
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tnt::compute::schema");
# tnt checkpoint payload. A checkpoint file is a 32-byte header (magic
# "TNTCKPT\0", format version, payload length, FNV-1a-64 of the payload)
# followed by one unpacked Cap'n Proto message with this root. Bump
# schemaVersion in checkpoint.cpp when the meaning of a field changes. New
# fields (and new union members) go at the end with the next ordinal: files
# written before them read them as empty, so older files stay readable under
# the same schemaVersion.

struct Array {
  name @0 :Text;
  shape @1 :List(Int64);
  values @2 :Data;            # little-endian float32, plain (row-major) layout
}

struct OptimizerOptions {
  kind @0 :Text;
  momentum @1 :Float64;
  nesterov @2 :Bool;
  weightDecay @3 :Float64;
  beta1 @4 :Float64;
  beta2 @5 :Float64;
  epsilon @6 :Float64;
  rho @7 :Float64;
  initialAccumulator @8 :Float64;
}

struct Entry {
  key @0 :Text;
  union {
    integer @1 :Int64;
    bytes @2 :Data;
    real @3 :Float64;
  }
}

# One callback's state (tnt::trainer::Callback::save_state), under the name the
# trainer gave it; the entries mean what that callback says they mean.
struct CallbackState {
  name @0 :Text;
  entries @1 :List(Entry);
}

struct Checkpoint {
  schemaVersion @0 :UInt32;
  kind @1 :Kind;
  modelToml @2 :Text;          # the ModelSpec, as a conf/models file
  parameters @3 :List(Array);  # in the model's parameter order
  states @4 :List(Array);      # BatchNorm running statistics
  hasOptimizer @5 :Bool;
  optimizerOptions @6 :OptimizerOptions;
  optimizerSteps @7 :UInt64;
  optimizerSlots @8 :List(Array);
  epoch @9 :UInt64;
  step @10 :UInt64;
  trainingPasses @11 :UInt64;
  extra @12 :List(Entry);      # trainer state (data order, ...)
  callbackStates @13 :List(CallbackState);  # empty in files written before it

  enum Kind {
    full @0;
    architecture @1;
    weights @2;
  }
}
