/** The browser bundle's entry (dist/deniable.min.js): the client and what an app passes to it. */

export { Client, type ClientOptions, type ClientStats } from "./client.js";
export { SpecError } from "./mechanisms.js";
export { InvalidInput, MetricSpec, type SpecData } from "./spec.js";
export { LocalStorage, MemoryStorage, type StateStorage } from "./storage.js";
