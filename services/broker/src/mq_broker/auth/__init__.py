"""The broker's ACL 2.0 side: users and ACLs kept in ``config/users.json`` / ``config/acls.json``
(:mod:`mq_broker.auth.metadata_manager`) and the checks of incoming requests (:mod:`mq_broker.auth.guard`)."""
