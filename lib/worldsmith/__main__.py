import sys

from worldsmith.cli.main import main

sys.exit(main())
