"""RocketMQ 5 ACL 2.0 in PyRocketMQ: users, resources, policies (model.py), request signing and authorisation.

Mirrors the `auth` module of Apache RocketMQ 5 (org.apache.rocketmq.auth.authentication / .authorization).
Imports no service and no generated protobuf type.
"""
