import sys

from attention_docs.cli import main

sys.exit(main())
