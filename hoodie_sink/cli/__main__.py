import sys

from hoodie_sink.cli import main

sys.exit(main())
