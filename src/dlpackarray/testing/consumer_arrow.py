RULES = {}


def check(consume, rec):
    pass
