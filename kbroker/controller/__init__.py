"""The controller: election through ZooKeeper, partition leadership, and the requests it sends to brokers."""
