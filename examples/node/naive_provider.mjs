// guarded_provider.mjs without its guard: resume goes ahead whatever the lease's cleanup is
// doing -- the bug the kit's provider scenarios exist to catch (as GuardlessProvider does in
// tests/kit/test_scenarios.py for the Python reference provider).
import { Provider, serveProvider } from "./guarded_provider.mjs";

class NaiveProvider extends Provider {
  checkCleanup() {}
}

serveProvider(new NaiveProvider());
