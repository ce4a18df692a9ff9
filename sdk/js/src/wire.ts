/** The wire format, as deniable.client.wire writes it: payload text, report JSON, batch body. */

import type { Payload } from "./mechanisms.js";

export const REPORTS_PATH = "/v1/reports";
export const METRICS_PATH = "/v1/metrics";

/** A float as Python's repr writes it (shortest round-trip digits; `1.0`, `1e-05`, `1e+16`). */
export function pythonFloatText(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError("not a finite payload");
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mantissa, exp] = Math.abs(x).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 16) {
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : "";
    return `${sign}${digits[0]}${rest}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction || "0"}`;
}

/** The canonical JSON text of a payload (sorted keys, no spaces; floats as Python writes them). */
export function payloadText(payload: Payload, numeric = false): string {
  if (typeof payload === "number") {
    if (numeric) return pythonFloatText(payload);
    if (!Number.isInteger(payload)) throw new RangeError("not an integer payload");
    return String(payload);
  }
  // A string, or an object whose keys every randomizer makes in sorted order (olh's a, b, y;
  // pem's b, l, r) and JSON keeps: its JSON text is the canonical one.
  return JSON.stringify(payload);
}

/** A report as its wire JSON object (keys in order id, metric, fingerprint, period, payload,
 * then its MetricSpec.dimsText, if any). */
export function reportText(id: string, metric: string, fingerprint: string, period: string, payloadJson: string, dims = ""): string {
  return `{"id":"${id}","metric":"${metric}","fingerprint":"${fingerprint}","period":"${period}","payload":${payloadJson}${dims}}`;
}

/** The POST /v1/reports body of report texts. */
export function batchBody(texts: readonly string[]): string {
  return `{"reports":[${texts.join(",")}]}`;
}
