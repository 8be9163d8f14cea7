// Placeholder until the IO model lands.
