import sys

from balance_dev.upstream_tests.harness import main

sys.exit(main())
