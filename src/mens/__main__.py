from mens.cli import main

raise SystemExit(main())
