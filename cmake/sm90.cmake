# sm90 kernel sources (owned by the sm90 kernel work)
