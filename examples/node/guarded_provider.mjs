// A CreateOS lease provider in JavaScript with the guard this project is about: while a
// lease's release or destroy is in flight, or after a cleanup that could not be confirmed,
// resume refuses with "CreateOS lease cleanup must finish before resume." -- as the reference
// provider (pytest_createos.provider) does. naive_provider.mjs is the same without the guard.
//
// Hooks take the reference provider's keyword arguments (company_id, environment_id, config,
// provider_lease_id, lease_metadata, ...); a lease is {provider_lease_id, metadata}. The API
// URL and key come from config.apiUrl / config.apiKey, else from CREATEOS_API_URL / _KEY.
// Kept small: execute runs `command args` through the buffered exec endpoint (no cwd, env,
// stdin or timeout), and a release does not cancel the lease's commands in flight.
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { CleanupPendingError, LeaseError, serve } from "./bridge.mjs";
import { ApiError, SandboxApi, SHAPE, sleep } from "./createos_api.mjs";

const WORKSPACE = "/paperclip-workspace";
const MARKER_PATH = `${WORKSPACE}/.paperclip-runtime/.paperclip-createos-lease`;
const TERMINAL = new Set(["destroying", "destroyed", "failed"]);
const MOVING = new Set(["creating", "pausing", "resuming"]);
const EXPIRED = { provider_lease_id: null, metadata: { expired: true } };

class SandboxGone extends Error {}

const CLEANUP_UNCONFIRMED =
  "CreateOS lease cleanup is unconfirmed; destroy the lease instead of reusing it.";

const unconfirmedError = (id) =>
  new LeaseError(CLEANUP_UNCONFIRMED, { kind: "CleanupUnconfirmedError", sandbox_id: id });

function settings(config) {
  const apiUrl = config.apiUrl ?? process.env.CREATEOS_API_URL;
  return {
    api: new SandboxApi(apiUrl, config.apiKey ?? process.env.CREATEOS_API_KEY),
    apiUrl,
    shape: config.shape ?? SHAPE,
    reuseLease: config.reuseLease === true,
    pollMs: config.pollIntervalMs ?? 250,
    timeoutMs: Math.min(config.timeoutMs ?? 30_000, 30_000),
  };
}

function checkOwner(metadata, companyId, environmentId) {
  if (metadata?.companyId !== companyId || metadata?.environmentId !== environmentId) {
    throw new LeaseError("CreateOS lease belongs to another company, environment or API URL.", {
      kind: "LeaseOwnershipError",
    });
  }
}

async function sandboxStatus(api, id) {
  try {
    return (await api.call("GET", `/v1/sandboxes/${id}`)).status;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) throw new SandboxGone();
    throw error;
  }
}

/** Ask for `target` (running or paused), then poll until the sandbox is there. A 409 says the
 * sandbox was not in a state for it yet: look again after a poll, and ask again. */
async function transition(cfg, id, target) {
  const deadline = Date.now() + cfg.timeoutMs;
  let asked = false;
  for (;;) {
    const status = await sandboxStatus(cfg.api, id);
    if (status === target) return;
    if (TERMINAL.has(status)) throw new SandboxGone();
    if (status === "error") {
      throw new LeaseError(`CreateOS sandbox did not reach ${target}: status error`);
    }
    if (!asked && !MOVING.has(status)) {
      const verb = target === "paused" ? "pause" : "resume";
      try {
        await cfg.api.call("POST", `/v1/sandboxes/${id}/${verb}`);
        asked = true;
        continue;
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 409)) throw error; // not yet: poll
      }
    }
    if (Date.now() >= deadline) {
      throw new LeaseError(`CreateOS sandbox did not reach ${target}: status ${status}`);
    }
    await sleep(cfg.pollMs);
  }
}

async function exec(cfg, id, cmd, args) {
  const data = await cfg.api.call("POST", `/v1/sandboxes/${id}/exec`, { body: { cmd, args } });
  return data.result;
}

async function deleteSandbox(cfg, id) {
  try {
    await cfg.api.call("DELETE", `/v1/sandboxes/${id}`);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error; // 404: deleted
  }
}

export class Provider {
  closing = new Set(); // leases whose release or destroy is in flight
  unconfirmed = new Set(); // leases whose cleanup could not be confirmed

  /** The guard: no resume until the lease's cleanup has finished. */
  checkCleanup(key) {
    if (this.closing.has(key)) throw new CleanupPendingError("closing");
    if (this.unconfirmed.has(key)) throw new CleanupPendingError("unconfirmed");
  }

  async acquire({ company_id, environment_id, config, run_id }) {
    const cfg = settings(config);
    const sandbox = await cfg.api.call("POST", "/v1/sandboxes", { body: { shape: cfg.shape } });
    const id = sandbox.id;
    const marker = randomUUID();
    try {
      await transition(cfg, id, "running");
      const made = await exec(cfg, id, "/bin/bash", ["-lc", `mkdir -p -- '${WORKSPACE}'`]);
      if (made.exit_code !== 0) {
        throw new LeaseError(`CreateOS workspace preparation failed: exit ${made.exit_code}`);
      }
      const path = `/v1/sandboxes/${id}/files`;
      await cfg.api.call("PUT", path, { raw: marker, query: { path: MARKER_PATH } });
    } catch (error) {
      await deleteSandbox(cfg, id).catch(() => {
        this.unconfirmed.add(`${cfg.apiUrl} ${id}`);
      });
      throw error;
    }
    const metadata = {
      provider: "createos",
      companyId: company_id,
      environmentId: environment_id,
      apiUrl: cfg.apiUrl,
      sandboxId: id,
      shape: cfg.shape,
      reuseLease: cfg.reuseLease,
      marker,
      workspace: WORKSPACE,
      ...(run_id ? { runId: run_id } : {}),
    };
    return { provider_lease_id: id, metadata };
  }

  async resume({ company_id, environment_id, config, provider_lease_id: id, lease_metadata }) {
    const cfg = settings(config);
    checkOwner(lease_metadata, company_id, environment_id);
    if (!id) return EXPIRED;
    this.checkCleanup(`${cfg.apiUrl} ${id}`);
    if (lease_metadata.sandboxId !== id || lease_metadata.apiUrl !== cfg.apiUrl) return EXPIRED;
    try {
      await transition(cfg, id, "running");
      const read = await exec(cfg, id, "/bin/cat", [MARKER_PATH]);
      if (read.exit_code !== 0 || read.stdout !== lease_metadata.marker) return EXPIRED;
    } catch (error) {
      if (error instanceof SandboxGone) return EXPIRED;
      throw error;
    }
    return { provider_lease_id: id, metadata: { ...lease_metadata, resumedLease: true } };
  }

  release(params) {
    return this.cleanup(params, { destroy: false });
  }

  destroy(params) {
    return this.cleanup(params, { destroy: true });
  }

  async cleanup(params, { destroy }) {
    const { company_id, environment_id, config, provider_lease_id: id, lease_metadata } = params;
    const cfg = settings(config);
    if (!id) return null; // an expired lease has nothing left to clean up
    checkOwner(lease_metadata, company_id, environment_id);
    const key = `${cfg.apiUrl} ${id}`;
    if (this.closing.has(key)) {
      throw new LeaseError("CreateOS lease cleanup is already in progress.", {
        kind: "CleanupInProgressError",
        retryable: true,
      });
    }
    this.closing.add(key);
    try {
      if (destroy || !cfg.reuseLease || lease_metadata.reuseLease !== true) {
        try {
          await deleteSandbox(cfg, id);
        } catch (error) {
          this.unconfirmed.add(key); // it may or may not be going away: nobody may resume it
          throw error;
        }
        this.unconfirmed.delete(key);
        return null;
      }
      if (this.unconfirmed.has(key)) {
        throw unconfirmedError(id);
      }
      await transition(cfg, id, "paused").catch((error) => {
        if (!(error instanceof SandboxGone)) throw error; // gone: the next resume expires it
      });
      return null;
    } finally {
      this.closing.delete(key);
    }
  }

  async execute({ config, lease, command, args = [] }) {
    const cfg = settings(config);
    const id = lease.provider_lease_id;
    const key = `${cfg.apiUrl} ${id}`;
    if (this.closing.has(key)) {
      throw new LeaseError("CreateOS lease is being released; no new work is accepted.");
    }
    if (this.unconfirmed.has(key)) {
      throw unconfirmedError(id);
    }
    let result;
    try {
      result = await exec(cfg, id, command, args);
    } catch (error) {
      // A 4xx says it never ran; a 5xx or a lost answer leaves its process unknown.
      if (!(error instanceof ApiError) || error.status >= 500) this.unconfirmed.add(key);
      throw error;
    }
    const { exit_code, stdout, stderr } = result;
    return { exit_code, signal: null, timed_out: false, stdout, stderr, metadata: {} };
  }

  async shutdown() {
    return null;
  }
}

/** Serve `provider`'s hooks over the bridge protocol. */
export function serveProvider(provider) {
  serve({
    acquire: (params) => provider.acquire(params),
    resume: (params) => provider.resume(params),
    release: (params) => provider.release(params),
    destroy: (params) => provider.destroy(params),
    execute: (params) => provider.execute(params),
    shutdown: () => provider.shutdown(),
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) serveProvider(new Provider());
