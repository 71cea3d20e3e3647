"""Storage engine benchmark; the same as `pocketmq bench store` (see pocketmq.bench.store)."""

import sys

from pocketmq.bench.store import main

if __name__ == "__main__":
    sys.exit(main())
