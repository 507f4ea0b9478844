// The program side of the pytest-createos bridge protocol, for Node (standard library only).
//
//   serve({ acquire, resume, ... })  announces the methods on stdout, then answers every
//   request line {"id", "method", "params"} with {"id", "result"} or {"id", "error"}.
//
// Requests are handled concurrently, answers go out as each call ends (in any order). stdout
// carries only the protocol: log to stderr (the kit puts it in its report). The program exits
// when its stdin closes. See docs/bridge.md for every message.
import { createInterface } from "node:readline";

export const CLEANUP_PENDING_MESSAGE = "CreateOS lease cleanup must finish before resume.";

/** An error the kit maps back to its own type: `kind` names it (e.g. "CleanupPendingError"). */
export class LeaseError extends Error {
  constructor(message, { kind = "LeaseError", retryable = false, ...extra } = {}) {
    super(message);
    this.kind = kind;
    this.retryable = retryable;
    this.extra = extra; // more fields of the error object, e.g. reason or sandbox_id
  }
}

/** The refusal hosts match on: resume while the lease's cleanup has not finished. */
export class CleanupPendingError extends LeaseError {
  constructor(reason = "closing") {
    super(CLEANUP_PENDING_MESSAGE, { kind: "CleanupPendingError", retryable: true, reason });
  }
}

function errorObject(error) {
  if (error instanceof LeaseError) {
    return { ...error.extra, message: error.message, kind: error.kind, retryable: error.retryable };
  }
  return { message: String(error?.message ?? error), kind: error?.name ?? "Error" };
}

export function serve(methods) {
  const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
  send({ bridge: 1, methods: Object.keys(methods) });
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", async (line) => {
    if (!line.trim()) return;
    const { id, method, params } = JSON.parse(line);
    if (id === undefined) return; // a notification ("cancel"): nothing to answer
    try {
      const result = await methods[method](params ?? {});
      send({ id, result: result ?? null });
    } catch (error) {
      if (!(error instanceof LeaseError)) {
        const cause = error?.cause ? `\n  caused by ${error.cause}` : "";
        console.error(`${method} #${id} failed: ${error?.stack ?? error}${cause}`);
      }
      send({ id, error: errorObject(error) });
    }
  });
  lines.on("close", () => process.exit(0));
}
