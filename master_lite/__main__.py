from master_lite._cli import main

raise SystemExit(main())
