"""`python -m voxcli` is the same program as the `voxcli` console script."""
from voxcli.cli.app import main

if __name__ == "__main__":
    main()
