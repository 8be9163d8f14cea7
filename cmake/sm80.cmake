# sm80 kernel sources (owned by the sm80 kernel work)
