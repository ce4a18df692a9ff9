// Replays the draws the Python client recorded in a vectors file (tests/vectors/*.json): each
// call must ask for the same kind of draw, and gets the value Python's randomness gave.
import assert from "node:assert/strict";

export class Replay {
  constructor(draws) { this.draws = draws; this.i = 0; }
  random() {
    const d = this.draws[this.i++];
    assert.equal(d?.[0], "f", "expected a float draw");
    return d[1];
  }
  randbelow(n) {
    const d = this.draws[this.i++];
    assert.deepEqual(d?.slice(0, 2), ["i", n], "expected an integer draw below the same n");
    return d[2];
  }
  bytes(n) {
    const d = this.draws[this.i++];
    assert.deepEqual(d?.slice(0, 2), ["b", n], "expected the same number of random bytes");
    return new Uint8Array(Buffer.from(d[2], "base64"));
  }
}
