/** Where a client keeps its state (specs, budget ledger, randomized reports; never a true value). */

/** A place for one JSON text, read and written whole. */
export interface StateStorage {
  load(): string | null;
  save(text: string): void;
  /** Keep a state the client could not read, for inspection, apart from the state it saves
   * next; where it was kept (a storage without this method cannot keep it). */
  setAside?(text: string): string;
}

/** State in memory only: lost when the page or process ends. */
export class MemoryStorage implements StateStorage {
  private text: string | null = null;
  /** The last state set aside as unreadable. */
  aside: string | null = null;
  load(): string | null { return this.text; }
  save(text: string): void { this.text = text; }
  setAside(text: string): string {
    this.aside = text;
    return "MemoryStorage.aside";
  }
}

/** State in a browser's localStorage under one key (an unreadable one kept under key + ".bad"). */
export class LocalStorage implements StateStorage {
  constructor(private readonly key = "deniable.state") {}
  load(): string | null { return globalThis.localStorage.getItem(this.key); }
  save(text: string): void { globalThis.localStorage.setItem(this.key, text); }
  setAside(text: string): string {
    globalThis.localStorage.setItem(`${this.key}.bad`, text);
    return `localStorage ${this.key}.bad`;
  }
}

/** localStorage where the platform has it, else memory. */
export function defaultStorage(): StateStorage {
  try {
    if (typeof globalThis.localStorage !== "undefined" && globalThis.localStorage !== null) return new LocalStorage();
  } catch {
    // a sandboxed page may throw on touching localStorage
  }
  return new MemoryStorage();
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v == "object" && v !== null && !Array.isArray(v);
const counts = (v: unknown): boolean => isRecord(v) && Object.values(v).every((n) => Number.isSafeInteger(n) && (n as number) >= 0);

/** What a remembered answer can be: a category index or numeric payload (a finite number), a
 * bit vector, or an object payload (olh, text); whether it fits its metric is checked on use. */
const isAnswer = (v: unknown): boolean => (typeof v == "number" ? Number.isFinite(v) : Array.isArray(v) || isRecord(v));

/** What each field of a saved state must be (a missing one takes its default). */
const FIELDS: Record<string, (v: unknown) => boolean> = {
  specs: (v) => isRecord(v) && Object.values(v).every(isRecord),
  etag: (v) => v === null || typeof v == "string",
  ledger: counts,
  queue: (v) => Array.isArray(v) && v.every((item) => typeof item == "string"),
  secret: (v) => typeof v == "string",
  memo: (v) => isRecord(v) && Object.entries(v).every(([key, answer]) => (key.startsWith("pin:") ? Number.isSafeInteger(answer) && (answer as number) >= 1 : isAnswer(answer))),
  totals: counts,
  memoSizes: counts,
  events: (v) => isRecord(v) && Array.isArray(v.active) && v.active.every((d) => Number.isSafeInteger(d))
    && isRecord(v.marks) && Object.values(v.marks).every((m) => Array.isArray(m) && m.length === 2 && typeof m[0] == "string" && Number.isSafeInteger(m[1]))
    && isRecord(v.days) && Object.values(v.days).every(isRecord),
};

/** Why the saved state `text` cannot be used (null when it can): not JSON, not version 1, or
 * the fields of the wrong shape, named (never their content). */
export function stateProblem(text: string): string | null {
  let state: unknown;
  try {
    state = JSON.parse(text);
  } catch {
    return "not JSON";
  }
  if (!isRecord(state) || state.version !== 1) return "not a version 1 state";
  const bad = Object.keys(FIELDS).filter((name) => name in state && !FIELDS[name](state[name]));
  return bad.length ? `malformed ${bad.join(", ")}` : null;
}
