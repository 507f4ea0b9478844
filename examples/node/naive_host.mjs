// The host everybody writes first -- example_hosts/naive.py in JavaScript, bug for bug:
//
// 1. release asks for the pause and returns; nothing stops a resume (or a command) from
//    racing that pause, and nothing waits for it to finish.
// 2. resume retries a refused resume at once, as fast as the API answers (a hot loop).
// 3. resume has no notion of a lease whose process cleanup is unconfirmed, and hands the
//    lease back whatever happened.
// 4. shutdown drops the connection and leaves the command it was running running.
//
// Leases are sandbox ids. Run it under the kit: SubprocessHost(["node", "naive_host.mjs"]).
import { serve } from "./bridge.mjs";
import { ApiError, SandboxApi, SHAPE } from "./createos_api.mjs";

// How often resume asks before giving up (and handing the lease back anyway).
const RESUME_ATTEMPTS = 100;

const api = new SandboxApi();

serve({
  async acquire() {
    const sandbox = await api.call("POST", "/v1/sandboxes", { body: { shape: SHAPE } });
    return sandbox.id;
  },

  async release({ lease }) {
    await api.call("POST", `/v1/sandboxes/${lease}/pause`); // bug 1
  },

  async resume({ lease }) {
    for (let attempt = 0; attempt < RESUME_ATTEMPTS; attempt++) {
      try {
        await api.call("POST", `/v1/sandboxes/${lease}/resume`);
        return lease;
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        // bug 2: no pause between attempts
      }
    }
    return lease; // bug 3: whatever happened, unconfirmed or not
  },

  async run({ lease, command }) {
    const body = { cmd: "/bin/bash", args: ["-lc", command] };
    const process = await api.call("POST", `/v1/sandboxes/${lease}/processes`, { body });
    const path = `/v1/sandboxes/${lease}/processes/${process.process_id}/wait`;
    const finished = await api.call("GET", path, { query: { timeout_ms: "60000" } });
    return finished.exit_code;
  },

  async shutdown() {
    api.close(); // bug 4
  },
});
