"""Stage 0: a toy "model" (an integer x) trained for 100 batches, no Determined code yet."""

import logging  # noqa: F401 - kept to mirror Determined's tutorial, unused here
import sys  # noqa: F401
import time


def main(increment_by):
    x = 0
    for _batch in range(100):
        x += increment_by
        time.sleep(0.1)
        print("x is now", x)


if __name__ == "__main__":
    main(increment_by=1)
