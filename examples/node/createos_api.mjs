// A minimal CreateOS sandbox API client (JSend envelopes over fetch), shared by the examples.
// The fake's URL and key come from CREATEOS_API_URL and CREATEOS_API_KEY unless given.

export const SHAPE = "s-1vcpu-1gb";

/** The API answered with an error status. */
export class ApiError extends Error {
  constructor(status, message, retryAfterMs = null) {
    super(`HTTP ${status}: ${message}`);
    this.name = "ApiError";
    this.status = status;
    /** How long the answer's Retry-After asks to wait, in ms (null: it names no wait). */
    this.retryAfterMs = retryAfterMs;
  }

  /** Worth retrying later: the sandbox was busy (409), or the service was (429, 5xx). */
  get transient() {
    return this.status === 409 || this.status === 429 || this.status >= 500;
  }
}

export class SandboxApi {
  constructor(url = process.env.CREATEOS_API_URL, apiKey = process.env.CREATEOS_API_KEY) {
    this.url = url;
    this.apiKey = apiKey;
    this.connection = new AbortController();
  }

  /** The `data` of a successful answer; ApiError for an error answer. Transport failures (a
   * reset, a lost answer) throw fetch's own TypeError. `raw` sends bytes instead of JSON. A 429
   * was refused before anything happened: it is sent again once its Retry-After is over, at
   * most RATE_LIMIT_RETRIES times (as the SDKs do). */
  async call(method, path, options = {}) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.once(method, path, options);
      } catch (error) {
        const limited = error instanceof ApiError && error.status === 429;
        if (!limited || attempt >= RATE_LIMIT_RETRIES) throw error;
        await sleep(error.retryAfterMs ?? RATE_LIMIT_DEFAULT_MS);
      }
    }
  }

  async once(method, path, { body, raw, query = {}, signal } = {}) {
    const url = new URL(path, this.url);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    const headers = { "X-Api-Key": this.apiKey };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (raw !== undefined) headers["Content-Type"] = "application/octet-stream";
    // Either the caller's signal or close() aborts the request (by hand: Node 18 has no
    // AbortSignal.any).
    const request = new AbortController();
    const abort = () => request.abort();
    const signals = [this.connection.signal, ...(signal ? [signal] : [])];
    for (const each of signals) each.addEventListener("abort", abort, { once: true });
    if (signals.some((each) => each.aborted)) abort();
    try {
      const response = await fetch(url, {
        method,
        headers,
        body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
        signal: request.signal,
      });
      const envelope = await response.json();
      if (response.status >= 400) {
        const wait = retryAfterMs(response.headers.get("retry-after"));
        throw new ApiError(response.status, String(envelope.message), wait);
      }
      return envelope.data;
    } finally {
      for (const each of signals) each.removeEventListener("abort", abort);
    }
  }

  /** Drop every request in flight, and refuse later ones. */
  close() {
    this.connection.abort();
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const RATE_LIMIT_RETRIES = 2;
const RATE_LIMIT_DEFAULT_MS = 500;

/** The wait a Retry-After header asks for, in ms: seconds or an HTTP date; null if none. */
function retryAfterMs(value) {
  if (value === null || value.trim() === "") return null;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - Date.now();
  return Number.isFinite(ms) ? Math.max(0, ms) : null;
}
