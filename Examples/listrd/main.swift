print("listrd")
