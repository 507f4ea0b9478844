// A minimal CreateOS sandbox API client (JSend envelopes over fetch), shared by the examples.
// The fake's URL and key come from CREATEOS_API_URL and CREATEOS_API_KEY unless given.

export const SHAPE = "s-1vcpu-1gb";

/** The API answered with an error status. */
export class ApiError extends Error {
  constructor(status, message) {
    super(`HTTP ${status}: ${message}`);
    this.name = "ApiError";
    this.status = status;
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
   * reset, a lost answer) throw fetch's own TypeError. `raw` sends bytes instead of JSON. */
  async call(method, path, { body, raw, query = {}, signal } = {}) {
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
      if (response.status >= 400) throw new ApiError(response.status, String(envelope.message));
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
