"""What the tests share: where things are, the anchors the cross-checks compare with,
reference implementations and tiny models, directories and records built once.
"""
