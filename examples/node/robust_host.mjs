// The same host done right -- example_hosts/robust.py in JavaScript: cleanup finishes before
// resume.
//
// - Lifecycle calls are serialised per lease (one lock each), so a resume waits for the
//   release of the same lease instead of racing it, and two resumes never send two requests.
// - Transitions are waited out (poll until paused / running), so nothing is attached to a
//   sandbox that is still going away.
// - Refusals are retried with jittered exponential backoff, bounded in attempts.
// - Anything that cannot be confirmed -- a pause whose answer was lost, a process start whose
//   answer was lost, a command abandoned on shutdown -- makes the lease unconfirmed: it is
//   destroyed, and the next resume acquires a fresh lease instead.
//
// Leases are sandbox ids. Run it under the kit: SubprocessHost(["node", "robust_host.mjs"]).
import { serve } from "./bridge.mjs";
import { ApiError, SandboxApi, SHAPE, sleep } from "./createos_api.mjs";

const BASE_DELAY_MS = 50;
const MAX_DELAY_MS = 1000;
const MAX_ATTEMPTS = 6;
const POLL_MS = 10;
const TIMEOUT_MS = 10_000;
const GONE = new Set(["destroying", "destroyed", "failed"]);
const MOVING = new Set(["creating", "pausing", "resuming"]);

const api = new SandboxApi();
const locks = new Map(); // lease -> the tail of its queue of lifecycle calls
const unconfirmed = new Set();
const destroyed = new Set();
const commands = new Map(); // the AbortController of each running command -> its promise

/** Run `work` after every earlier call on the same lease has ended. */
function serialised(lease, work) {
  const result = (locks.get(lease) ?? Promise.resolve()).then(work);
  locks.set(lease, result.catch(() => undefined));
  return result;
}

/** `attempt()`, retried with jittered exponential backoff while it fails transiently. */
async function retrying(attempt, { transportToo = false } = {}) {
  for (let number = 1; ; number++) {
    try {
      return await attempt();
    } catch (error) {
      const retry = error instanceof ApiError ? error.transient : transportToo;
      if (!retry || number === MAX_ATTEMPTS) throw error;
    }
    const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (number - 1));
    await sleep(ceiling / 2 + Math.random() * (ceiling / 2));
  }
}

async function status(lease) {
  try {
    return (await api.call("GET", `/v1/sandboxes/${lease}`)).status;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return "destroyed";
    throw error;
  }
}

/** The sandbox's status once no transition is in flight (bounded by TIMEOUT_MS). */
async function settledStatus(lease) {
  const deadline = Date.now() + TIMEOUT_MS;
  let now = await status(lease);
  while (MOVING.has(now) && Date.now() < deadline) {
    await sleep(POLL_MS);
    now = await status(lease);
  }
  return now;
}

async function waitFor(lease, wanted) {
  const now = await settledStatus(lease);
  if (now !== wanted) throw new ApiError(409, `sandbox ${lease} is ${now}, not ${wanted}`);
}

async function destroy(lease) {
  // A delete is idempotent, so a lost answer is simply asked again; 404 counts as deleted.
  await retrying(
    async () => {
      try {
        await api.call("DELETE", `/v1/sandboxes/${lease}`);
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 404)) throw error;
      }
    },
    { transportToo: true },
  );
  unconfirmed.delete(lease);
  destroyed.add(lease);
}

async function acquire() {
  const sandbox = await api.call("POST", "/v1/sandboxes", { body: { shape: SHAPE } });
  await waitFor(sandbox.id, "running");
  return sandbox.id;
}

async function start(lease, command, signal) {
  const body = { cmd: "/bin/bash", args: ["-lc", command] };
  try {
    const process = await api.call("POST", `/v1/sandboxes/${lease}/processes`, { body, signal });
    return process.process_id;
  } catch (error) {
    // A 4xx says it did not start; anything else (5xx, a lost answer, an abort) leaves it
    // unknown: nobody knows its id, so nobody can confirm it was cleaned up.
    if (!(error instanceof ApiError) || error.status >= 500) unconfirmed.add(lease);
    throw error;
  }
}

async function terminate(lease, pid) {
  try {
    const path = `/v1/sandboxes/${lease}/processes/${pid}`;
    const process = await api.call("DELETE", path, { query: { grace_ms: "1000" } });
    if (process.tree_exited !== true) unconfirmed.add(lease);
  } catch {
    unconfirmed.add(lease);
  }
}

async function run(lease, command, signal) {
  const pid = await start(lease, command, signal);
  try {
    const path = `/v1/sandboxes/${lease}/processes/${pid}/wait`;
    const finished = await api.call("GET", path, { query: { timeout_ms: "60000" }, signal });
    return finished.exit_code;
  } catch (error) {
    await terminate(lease, pid);
    throw error;
  }
}

serve({
  acquire,

  release({ lease }) {
    return serialised(lease, async () => {
      if (unconfirmed.has(lease)) return destroy(lease);
      try {
        await retrying(() => api.call("POST", `/v1/sandboxes/${lease}/pause`));
        await waitFor(lease, "paused");
      } catch {
        // The pause may or may not have happened: we cannot vouch for this sandbox.
        unconfirmed.add(lease);
        await destroy(lease);
      }
    });
  },

  resume({ lease }) {
    return serialised(lease, async () => {
      if (unconfirmed.has(lease)) await destroy(lease);
      if (destroyed.has(lease)) return acquire();
      const now = await settledStatus(lease);
      if (now === "paused") {
        await retrying(() => api.call("POST", `/v1/sandboxes/${lease}/resume`));
        await waitFor(lease, "running");
        return lease;
      }
      if (now === "running") return lease;
      if (!GONE.has(now)) await destroy(lease); // error or unknown: not worth keeping
      return acquire();
    });
  },

  run({ lease, command }) {
    const stop = new AbortController();
    const running = run(lease, command, stop.signal).finally(() => commands.delete(stop));
    commands.set(stop, running);
    return running;
  },

  async shutdown() {
    // Stop every command, destroy every lease that cannot be vouched for.
    const running = [...commands.values()];
    for (const stop of commands.keys()) stop.abort();
    await Promise.allSettled(running);
    for (const lease of unconfirmed) await destroy(lease).catch(() => undefined);
  },
});
