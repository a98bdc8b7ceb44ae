"""A Listr store of a given size, as the XML property list `listrctl store replace` takes."""

import uuid


def write_store_plist(path, size):
    """Writes an XML property list of about `size` bytes in Listr's dump format: an array of dicts
    with `id` (UUID string), `title` and `done`."""
    title = "Buy " + "milk and bread " * 60  # about 900 bytes per item
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                  '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
                  '<plist version="1.0">\n<array>\n')
        written = 0
        index = 0
        while written < size:
            item = (f"\t<dict>\n\t\t<key>done</key>\n\t\t<{'true' if index % 3 == 0 else 'false'}/>\n"
                    f"\t\t<key>id</key>\n\t\t<string>{str(uuid.uuid4()).upper()}</string>\n"
                    f"\t\t<key>title</key>\n\t\t<string>{title}{index}</string>\n\t</dict>\n")
            out.write(item)
            written += len(item)
            index += 1
        out.write("</array>\n</plist>\n")


def write_items_plist(path, count):
    """Writes `count` items in Listr's dump format with short titles (about 60 bytes), like a
    real to-do list: 200,000 of them are a 31 MB JSON store, as in the issue's measurement."""
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                  '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
                  '<plist version="1.0">\n<array>\n')
        for index in range(count):
            out.write(f"\t<dict>\n\t\t<key>done</key>\n\t\t<{'true' if index % 3 == 0 else 'false'}/>\n"
                      f"\t\t<key>id</key>\n\t\t<string>{str(uuid.uuid4()).upper()}</string>\n"
                      f"\t\t<key>title</key>\n\t\t<string>Buy milk, bread and eggs at the corner shop, item {index}</string>\n\t</dict>\n")
        out.write("</array>\n</plist>\n")
