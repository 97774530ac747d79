from fpdiff.cli import main

raise SystemExit(main())
