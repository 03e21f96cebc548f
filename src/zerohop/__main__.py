from zerohop.cli import main

main()
