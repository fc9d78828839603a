@0xb1d6a2f3c4e5f607;
struct Dummy { x @0 :UInt32; }
