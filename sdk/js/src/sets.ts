/** The set metric's randomizer, as deniable.client.mechanisms.PaddingSampling defines it
 * (docs/STATS.md section 16): padding-and-sampling (Wang, Li & Jha, IEEE S&P 2018) of a subset of
 * k categories through a frequency oracle (krr, oue or olh) over k + L items. */

import { type Mechanism, type Payload, SpecError, MAX_CATEGORIES, makeMechanism } from "./mechanisms.js";
import { type Randomness, systemRandomness } from "./random.js";

/** The largest declared maximum set size L. */
export const MAX_SET_ITEMS = 64;

/** Padding-and-sampling: pad the set with the dummies k, k+1, .. to L items, draw one item
 * uniformly (one of the set when it holds L or more), and report it through the oracle over
 * k + L items at the whole eps. A report is one item through an eps-LDP oracle, so any two
 * sets give output laws within e^eps. */
export class PaddingSampling {
  readonly name = "ps";
  readonly oracle: Mechanism;
  readonly epsilon: number;
  constructor(readonly k: number, readonly maxItems: number, epsilon: number, oracle = "auto") {
    if (!Number.isInteger(k) || k < 2) throw new SpecError("k (the number of categories) must be an integer >= 2");
    if (k > MAX_CATEGORIES) throw new SpecError(`at most ${MAX_CATEGORIES} categories are supported, got ${k}`);
    if (!Number.isInteger(maxItems) || maxItems < 1 || maxItems > MAX_SET_ITEMS) {
      throw new SpecError(`max_items must be an integer in 1..${MAX_SET_ITEMS}`);
    }
    if (k + maxItems > MAX_CATEGORIES) throw new SpecError(`categories plus max_items must be at most ${MAX_CATEGORIES}`);
    if (oracle === "brr") throw new SpecError("a set's oracle is krr, oue or olh over k + max_items items");
    this.oracle = makeMechanism(oracle, k + maxItems, epsilon);
    this.epsilon = this.oracle.epsilon;
  }

  /** k + L: the oracle's items, the categories then the dummies. */
  get width(): number { return this.oracle.k; }
  get pStar(): number { return this.oracle.pStar; }
  get qStar(): number { return this.oracle.qStar; }

  /** The set as sorted distinct category indices; a RangeError (never echoing it) otherwise.
   * An array or a Set of indices is accepted (repeats count once). */
  checkValue(items: unknown): number[] {
    if (!(Array.isArray(items) || items instanceof Set)) throw new RangeError("value is not a set of category indices");
    const out = new Set<number>();
    for (const v of items) {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v >= this.k) {
        throw new RangeError(`value holds something other than category indices in 0..${this.k - 1}`);
      }
      out.add(v);
    }
    return [...out].sort((a, b) => a - b);
  }

  /** One item of the padded set, drawn uniformly (items: sorted distinct indices). */
  sample(items: number[], rng: Randomness = systemRandomness): number {
    const draw = rng.randbelow(Math.max(items.length, this.maxItems));
    return draw < items.length ? items[draw] : this.k + draw - items.length;
  }

  /** Pad, sample one item, and report it through the oracle (eps-LDP for the whole set). */
  randomize(items: unknown, rng: Randomness = systemRandomness): Payload {
    return this.oracle.randomize(this.sample(this.checkValue(items), rng), rng);
  }
}
