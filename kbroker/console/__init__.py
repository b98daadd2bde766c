"""`kbroker console`: a web console for any Kafka-protocol cluster (kbroker or Apache Kafka).

It reaches the cluster only through the project's one protocol client (admin_cli's AdminClient, the same calls as
kadmin), optionally ZooKeeper for what only ZooKeeper knows, and the brokers' Prometheus endpoints for charts.
Pages: Overview, Topics (and a topic's partitions), Messages, Consumer groups, Brokers, Security, Transactions,
Reassignments; one module each, a Flask blueprint with its templates.

Flask (Pallets: Werkzeug routing, Jinja2 templates that escape every value by default) is served by gevent's
WSGI server, the loop the brokers run on, so one slow cluster call never stalls other visitors. Chart.js (MIT,
vendored under static/vendor with its licence, no CDN at run time) draws the charts in the browser.

Security: on a cluster whose listener needs SASL (`--command-config` with security.protocol SASL_*), every page
asks for a login and the console then acts as that principal (the brokers' ACLs decide what it sees); the
credentials stay in the console process, the browser holds only a signed session id. Every form carries a
per-session token, and a POST without it (or from another origin) is refused (visitors.py).
"""
