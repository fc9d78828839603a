@0xb7c1e4a8d2f3a951;
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tnt::transport::wire");
# Control-plane messages of tnt (bootstrap and failure handling). Every message travels as
# a 4-byte little-endian length followed by a flat Cap'n Proto message; the reader bounds
# the length before allocating anything. Data-plane messages are not Cap'n Proto: they are
# raw tagged buffers (see tcp/tcp_transport.cpp).

struct Hello {
  rank @0 :UInt32;
  size @1 :UInt32;
  jobId @2 :Text;
  protocolVersion @3 :UInt32;
  hostname @4 :Text;
  dataAddress @5 :Text;     # back-end specific, e.g. "10.0.0.7:40123" for TCP
  transport @6 :Text;       # tcp | ib
  configHash @7 :Data;      # SHA-256 of the run configuration the rank was given
}

struct PeerEntry {
  rank @0 :UInt32;
  hostname @1 :Text;
  dataAddress @2 :Text;
}

struct RendezvousReply {
  union {
    addressBook @0 :List(PeerEntry);
    refusal @1 :Text;       # why the master will not start this job
  }
}

struct Control {
  union {
    heartbeat @0 :Void;
    peerLost @1 :PeerLost;  # rank -> master: my channel to this rank failed
    abort @2 :Abort;        # master -> every rank: the job is over, here is why
    goodbye @3 :Void;       # rank -> master: I am done; master -> ranks: everyone is done
    progress @4 :Progress;  # rank -> master, instead of a heartbeat: how far its collectives got
    stallWarning @5 :Text;  # master -> every rank: log this (Note [Stall watch])
    failed @6 :Text;        # rank -> master: this rank failed on its own, and why (Note [One failure, every rank told])
  }
}

struct Call {
  sequence @0 :UInt64;
  signature @1 :UInt64;
  description @2 :Text;     # empty: no such call
}

struct Progress {
  issued @0 :UInt64;
  oldestPending @1 :Call;
  lastIssued @2 :Call;
  lastCompleted @3 :Call;
}

struct PeerLost {
  rank @0 :Int32;
  reason @1 :Text;
}

struct Abort {
  lostRank @0 :Int32;       # -1 when no single rank is to blame
  reason @1 :Text;
}
