from medagentgym.cli import main

main()
