/** deniable: local-differential-privacy telemetry for browsers and Node (no dependencies). */

export { Client, type ClientOptions, type ClientStats, acknowledgement, collectorRefusal } from "./client.js";
export {
  BRR, Duchi, Hybrid, KRR, OLH, OUE, Piecewise, SpecError, checkEpsilon, leastVariance, makeMechanism,
  makeNumericMechanism, olhHash, toBase64, TwoLayers, twoLayers, DEFAULT_INSTANTANEOUS_RATIO, type Mechanism, type NumericMechanism, type Payload, type TextPayload,
  HYBRID_THRESHOLD, MAX_CATEGORIES, MAX_EPSILON, MAX_KRR_CATEGORIES, MIN_EPSILON, NUMERIC_GRID, OLH_PRIME,
} from "./mechanisms.js";
export { MAX_SET_ITEMS, PaddingSampling } from "./sets.js";
export { CryptoRandomness, type Randomness, systemRandomness, uuid4 } from "./random.js";
export { hmacSha256Hex, sha256Hex } from "./sha256.js";
export { InvalidInput, MAX_CELLS, MAX_DIMENSION_CELLS, MAX_DIMENSION_VALUES, MetricSpec, OTHER, type TextFactory, type TextRandomizer, type Delivery, type MetricType, type PeriodKind, type SpecData, canonicalJson, periodLabel } from "./spec.js";
export { AGGREGATES, type Aggregate, DayAggregate, type EventRule, MAX_BACKFILL_DAYS, MEDIAN_BINS, WINDOW_DAYS, fsum, medianBin, windowValue } from "./events.js";
export { ACTIVE_DAYS_KEPT, type BookData, type DueWindow, type Window, WindowBook, addObservation, dayNumber, firstWindowEnd, windowEnding } from "./windows.js";
export { LocalStorage, MemoryStorage, type StateStorage, defaultStorage } from "./storage.js";
export { METRICS_PATH, REPORTS_PATH, batchBody, payloadText, pythonFloatText, reportText } from "./wire.js";
export { fromBase64, parseNumericPayload, parsePayload, parseTextPayload, supported, twoLayersRates } from "./payloads.js";
