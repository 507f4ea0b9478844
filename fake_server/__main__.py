"""``python -m fake_server`` is ``fake-createos``."""

import sys

from fake_server.cli import main

sys.exit(main())
