from diagbench.cli import main

main()
