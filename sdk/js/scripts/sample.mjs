// Many reports of one value through the JS SDK's real record() path, for an auditor: the JS
// twin of deniable.client.sampling.randomized_reports. Prints the POST /v1/reports body a device
// would upload after COUNT calls of record(spec.name, VALUE), with a budget that admits them all.
//   node scripts/sample.mjs '<spec JSON>' '<value JSON>' COUNT
import { sample } from "./sampling.mjs";

const [specText, valueText, countText] = process.argv.slice(2);
if (countText === undefined) {
  console.error("usage: node scripts/sample.mjs '<spec JSON>' '<value JSON>' COUNT");
  process.exit(2);
}
try {
  process.stdout.write(sample(JSON.parse(specText), JSON.parse(valueText), Number(countText)));
} catch (exc) {
  console.error(`sample: ${exc.message}`);
  process.exit(1);
}
