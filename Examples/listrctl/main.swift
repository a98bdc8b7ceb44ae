print("listrctl")
