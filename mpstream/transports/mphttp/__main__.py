"""`python -m mpstream.transports.mphttp`: the proxy program."""

import sys

from mpstream.transports.mphttp.program import main

sys.exit(main())
