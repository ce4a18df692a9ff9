// The record() path with a ledger that admits every report (see sample.mjs).
import { batchBody, Client, InvalidInput, MemoryStorage } from "../dist/index.js";
import { pem } from "../dist/text.js";

/** The POST /v1/reports body after `count` calls of record(spec.name, value). */
export function sample(spec, value, count) {
  if (!Number.isInteger(count) || count < 1) throw new InvalidInput("count must be a whole number of at least 1");
  const storage = new MemoryStorage();
  const client = new Client({
    url: "http://127.0.0.1:9", metrics: [spec], text: pem, storage, maxReportsPerPeriod: count, maxQueue: count, flushInterval: 0, refreshInterval: 0,
  });
  for (let i = 0; i < count; i++) client.record(spec.name, value);
  client.save();
  return batchBody(JSON.parse(storage.load()).queue);
}
