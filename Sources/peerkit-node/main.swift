// placeholder, replaced by the core commit
print("peerkit-node")
