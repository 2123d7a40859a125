import sys

from balance_dev.suite.cli import main

sys.exit(main())
