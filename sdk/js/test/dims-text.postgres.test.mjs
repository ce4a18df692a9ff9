// test/dims-text.test.mjs again, its collector on PostgreSQL (a database created and dropped by the run).
import { test } from "node:test";
import { onPostgres } from "./collector.mjs";

await onPostgres(new URL("./dims-text.test.mjs", import.meta.url).href, test);
