/** Node only: state in one file, replaced atomically (write a temporary file, then rename). */

import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { StateStorage } from "./storage.js";

export { Client } from "./client.js";

/** The client's state in `path` (its folder made if missing), mode 0600. */
export class FileStorage implements StateStorage {
  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  }
  load(): string | null {
    try {
      return readFileSync(this.path, "utf8");
    } catch (exc) {
      if ((exc as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw exc;
    }
  }
  save(text: string): void {
    const temporary = `${this.path}.tmp`;
    writeFileSync(temporary, text, { mode: 0o600 });
    renameSync(temporary, this.path);
  }
  /** The unreadable state file moved aside, byte for byte, to `path.bad-<milliseconds>`. */
  setAside(text: string): string {
    const aside = `${this.path}.bad-${Date.now()}`;
    try {
      renameSync(this.path, aside);
    } catch {
      writeFileSync(aside, text, { mode: 0o600 });
    }
    return aside;
  }
}
