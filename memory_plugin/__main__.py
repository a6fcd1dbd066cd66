from memory_plugin.cli import main

raise SystemExit(main())
