"""The fleet on a virtual clock (`zerohop simulate`): the engine model of `zerohop sim`
run as a discrete-event simulation over N replicas behind an optional layer of finite
capacity, writing the same results folder as a live run. No sockets, no Locust."""
